-- AlterTable
ALTER TABLE "ByokCredential" ADD COLUMN "weight" INTEGER NOT NULL DEFAULT 1;

-- AlterTable
ALTER TABLE "ProviderKey" ADD COLUMN "weight" INTEGER NOT NULL DEFAULT 1;
