-- AlterTable
ALTER TABLE "Generation" ADD COLUMN     "serverTools" TEXT;
