-- DropIndex
DROP INDEX "Generation_organizationId_createdAt_idx";

-- AlterTable
ALTER TABLE "Generation" ADD COLUMN "contextTerms" TEXT;
ALTER TABLE "Generation" ADD COLUMN "metadata" TEXT;
ALTER TABLE "Generation" ADD COLUMN "sessionId" TEXT;
ALTER TABLE "Generation" ADD COLUMN "trace" TEXT;
ALTER TABLE "Generation" ADD COLUMN "traceId" TEXT;
ALTER TABLE "Generation" ADD COLUMN "user" TEXT;

-- CreateIndex
CREATE INDEX "Generation_organizationId_createdAt_id_idx" ON "Generation"("organizationId", "createdAt", "id");

-- CreateIndex
CREATE INDEX "Generation_organizationId_keyHash_createdAt_id_idx" ON "Generation"("organizationId", "keyHash", "createdAt", "id");
