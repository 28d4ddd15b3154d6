-- AlterTable
ALTER TABLE "Generation" ADD COLUMN "plugins" TEXT;
