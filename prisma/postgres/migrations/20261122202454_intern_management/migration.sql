-- AlterTable
ALTER TABLE "Intern" ADD COLUMN     "agentName" TEXT,
ADD COLUMN     "configuredModel" TEXT,
ADD COLUMN     "description" TEXT,
ADD COLUMN     "instructions" TEXT,
ADD COLUMN     "suspendedAt" TIMESTAMP(3);
