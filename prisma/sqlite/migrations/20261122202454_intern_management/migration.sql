-- AlterTable
ALTER TABLE "Intern" ADD COLUMN "agentName" TEXT;
ALTER TABLE "Intern" ADD COLUMN "configuredModel" TEXT;
ALTER TABLE "Intern" ADD COLUMN "description" TEXT;
ALTER TABLE "Intern" ADD COLUMN "instructions" TEXT;
ALTER TABLE "Intern" ADD COLUMN "suspendedAt" DATETIME;
