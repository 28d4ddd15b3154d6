-- CreateTable
CREATE TABLE "SpendCounter" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "limitFemtoUsd" BIGINT,
    "limitReset" TEXT NOT NULL DEFAULT 'none',
    "spentFemtoUsd" BIGINT NOT NULL DEFAULT 0,
    "reservedFemtoUsd" BIGINT NOT NULL DEFAULT 0,
    "windowStartMs" BIGINT NOT NULL DEFAULT 0
);

-- CreateTable
CREATE TABLE "SpendReservation" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "keyCounterId" TEXT,
    "wsCounterId" TEXT,
    "amountFemtoUsd" BIGINT NOT NULL,
    "expiresAtMs" BIGINT NOT NULL
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_ApiKey" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "hash" TEXT NOT NULL,
    "label" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "isManagement" BOOLEAN NOT NULL DEFAULT false,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL,
    "creatorUserId" TEXT NOT NULL,
    "disabled" BOOLEAN NOT NULL DEFAULT false,
    "revokedAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" DATETIME,
    "limitFemtoUsd" BIGINT,
    "limitReset" TEXT NOT NULL DEFAULT 'none',
    "rateLimitRpm" INTEGER,
    "rateLimitTpm" INTEGER,
    CONSTRAINT "ApiKey_organizationId_fkey" FOREIGN KEY ("organizationId") REFERENCES "Organization" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);
INSERT INTO "new_ApiKey" ("createdAt", "creatorUserId", "disabled", "hash", "id", "isManagement", "label", "name", "organizationId", "revokedAt", "updatedAt", "workspaceId") SELECT "createdAt", "creatorUserId", "disabled", "hash", "id", "isManagement", "label", "name", "organizationId", "revokedAt", "updatedAt", "workspaceId" FROM "ApiKey";
DROP TABLE "ApiKey";
ALTER TABLE "new_ApiKey" RENAME TO "ApiKey";
CREATE UNIQUE INDEX "ApiKey_hash_key" ON "ApiKey"("hash");
CREATE INDEX "ApiKey_organizationId_idx" ON "ApiKey"("organizationId");
CREATE TABLE "new_Workspace" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "slug" TEXT NOT NULL,
    "isDefault" BOOLEAN NOT NULL DEFAULT false,
    "description" TEXT,
    "createdBy" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "deletedAt" DATETIME,
    "budgetFemtoUsd" BIGINT,
    "budgetReset" TEXT NOT NULL DEFAULT 'none',
    "rateLimitRpm" INTEGER,
    "rateLimitTpm" INTEGER,
    CONSTRAINT "Workspace_organizationId_fkey" FOREIGN KEY ("organizationId") REFERENCES "Organization" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);
INSERT INTO "new_Workspace" ("createdAt", "createdBy", "deletedAt", "description", "id", "isDefault", "name", "organizationId", "slug", "updatedAt") SELECT "createdAt", "createdBy", "deletedAt", "description", "id", "isDefault", "name", "organizationId", "slug", "updatedAt" FROM "Workspace";
DROP TABLE "Workspace";
ALTER TABLE "new_Workspace" RENAME TO "Workspace";
CREATE UNIQUE INDEX "Workspace_organizationId_slug_key" ON "Workspace"("organizationId", "slug");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "SpendReservation_expiresAtMs_idx" ON "SpendReservation"("expiresAtMs");
