-- AlterTable
ALTER TABLE "Generation" ADD COLUMN "dialect" TEXT;
