-- AlterTable
ALTER TABLE "ApiKey" ADD COLUMN     "expiresAt" TIMESTAMP(3),
ADD COLUMN     "limitFemtoUsd" BIGINT,
ADD COLUMN     "limitReset" TEXT NOT NULL DEFAULT 'none',
ADD COLUMN     "rateLimitRpm" INTEGER,
ADD COLUMN     "rateLimitTpm" INTEGER;

-- AlterTable
ALTER TABLE "Workspace" ADD COLUMN     "budgetFemtoUsd" BIGINT,
ADD COLUMN     "budgetReset" TEXT NOT NULL DEFAULT 'none',
ADD COLUMN     "rateLimitRpm" INTEGER,
ADD COLUMN     "rateLimitTpm" INTEGER;

-- CreateTable
CREATE TABLE "SpendCounter" (
    "id" TEXT NOT NULL,
    "limitFemtoUsd" BIGINT,
    "limitReset" TEXT NOT NULL DEFAULT 'none',
    "spentFemtoUsd" BIGINT NOT NULL DEFAULT 0,
    "reservedFemtoUsd" BIGINT NOT NULL DEFAULT 0,
    "windowStartMs" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "SpendCounter_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "SpendReservation" (
    "id" TEXT NOT NULL,
    "keyCounterId" TEXT,
    "wsCounterId" TEXT,
    "amountFemtoUsd" BIGINT NOT NULL,
    "expiresAtMs" BIGINT NOT NULL,

    CONSTRAINT "SpendReservation_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "SpendReservation_expiresAtMs_idx" ON "SpendReservation"("expiresAtMs");
