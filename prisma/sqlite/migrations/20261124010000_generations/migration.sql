-- CreateTable
CREATE TABLE "Generation" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "requestedModel" TEXT NOT NULL,
    "model" TEXT,
    "provider" TEXT,
    "credentialId" TEXT,
    "credentialSource" TEXT,
    "presetSlug" TEXT,
    "presetVersion" INTEGER,
    "streamed" BOOLEAN NOT NULL,
    "promptTokens" INTEGER,
    "completionTokens" INTEGER,
    "totalTokens" INTEGER,
    "latencyMs" INTEGER NOT NULL,
    "timeToFirstTokenMs" INTEGER,
    "status" TEXT NOT NULL,
    "finishReason" TEXT,
    "errorCode" INTEGER,
    "attempts" INTEGER NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- CreateIndex
CREATE INDEX "Generation_organizationId_createdAt_idx" ON "Generation"("organizationId", "createdAt");
