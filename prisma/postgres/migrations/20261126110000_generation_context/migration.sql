-- DropIndex
DROP INDEX "Generation_organizationId_createdAt_idx";

-- AlterTable
ALTER TABLE "Generation" ADD COLUMN     "contextTerms" TEXT,
ADD COLUMN     "metadata" TEXT,
ADD COLUMN     "sessionId" TEXT,
ADD COLUMN     "trace" TEXT,
ADD COLUMN     "traceId" TEXT,
ADD COLUMN     "user" TEXT;

-- CreateIndex
CREATE INDEX "Generation_organizationId_createdAt_id_idx" ON "Generation"("organizationId", "createdAt", "id");

-- CreateIndex
CREATE INDEX "Generation_organizationId_keyHash_createdAt_id_idx" ON "Generation"("organizationId", "keyHash", "createdAt", "id");
