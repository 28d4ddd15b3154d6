-- AlterTable
ALTER TABLE "Generation" ADD COLUMN     "catalogModel" TEXT;
