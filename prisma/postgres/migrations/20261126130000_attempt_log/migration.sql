-- AlterTable
ALTER TABLE "Generation" ADD COLUMN "attemptsLog" TEXT;
