-- AlterTable
ALTER TABLE "InternInteraction" ADD COLUMN     "arguments" JSONB;

-- AlterTable
ALTER TABLE "InternRun" ADD COLUMN     "leaseUntil" TIMESTAMP(3),
ADD COLUMN     "owner" TEXT;

-- CreateIndex
CREATE INDEX "InternRun_state_leaseUntil_idx" ON "InternRun"("state", "leaseUntil");

