-- AlterTable
ALTER TABLE "Workspace" ADD COLUMN     "contentLogRetentionDays" INTEGER;

-- CreateTable
CREATE TABLE "GenerationContent" (
    "id" TEXT NOT NULL,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "keyId" TEXT NOT NULL,
    "ciphertext" BYTEA NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "GenerationContent_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "GenerationContent_expiresAt_idx" ON "GenerationContent"("expiresAt");

-- CreateIndex
CREATE INDEX "GenerationContent_workspaceId_idx" ON "GenerationContent"("workspaceId");
