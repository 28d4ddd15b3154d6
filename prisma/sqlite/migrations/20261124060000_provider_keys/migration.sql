-- CreateTable
CREATE TABLE "ProviderKey" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "provider" TEXT NOT NULL,
    "label" TEXT NOT NULL,
    "ciphertext" BLOB NOT NULL,
    "keyId" TEXT NOT NULL,
    "disabled" BOOLEAN NOT NULL DEFAULT false,
    "sortOrder" INTEGER NOT NULL DEFAULT 0,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- CreateIndex
CREATE INDEX "ProviderKey_provider_idx" ON "ProviderKey"("provider");

-- CreateIndex
CREATE INDEX "ProviderKey_keyId_idx" ON "ProviderKey"("keyId");
