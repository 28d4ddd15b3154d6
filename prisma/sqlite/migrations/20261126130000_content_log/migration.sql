-- CreateTable
CREATE TABLE "GenerationContent" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "keyId" TEXT NOT NULL,
    "ciphertext" BLOB NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE INDEX "GenerationContent_expiresAt_idx" ON "GenerationContent"("expiresAt");

-- CreateIndex
CREATE INDEX "GenerationContent_workspaceId_idx" ON "GenerationContent"("workspaceId");

-- AlterTable
ALTER TABLE "Workspace" ADD COLUMN "contentLogRetentionDays" INTEGER;
