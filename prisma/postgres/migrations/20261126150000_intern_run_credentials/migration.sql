-- AlterTable
ALTER TABLE "Generation" ADD COLUMN "internId" TEXT;
ALTER TABLE "Generation" ADD COLUMN "internRunId" TEXT;
ALTER TABLE "Generation" ADD COLUMN "internSessionId" TEXT;

-- CreateTable
CREATE TABLE "InternRunCredential" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "tokenHash" TEXT NOT NULL,
    "runId" TEXT NOT NULL,
    "internId" TEXT NOT NULL,
    "sessionId" TEXT NOT NULL,
    "sessionKey" TEXT NOT NULL,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "keyId" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "revokedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- CreateIndex
CREATE INDEX "Generation_internRunId_idx" ON "Generation"("internRunId");

-- CreateIndex
CREATE UNIQUE INDEX "InternRunCredential_tokenHash_key" ON "InternRunCredential"("tokenHash");

-- CreateIndex
CREATE UNIQUE INDEX "InternRunCredential_runId_key" ON "InternRunCredential"("runId");

-- CreateIndex
CREATE INDEX "InternRunCredential_expiresAt_idx" ON "InternRunCredential"("expiresAt");
