-- CreateTable
CREATE TABLE "RoutingSettings" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL DEFAULT '',
    "allowedProviders" JSONB,
    "ignoredProviders" JSONB,
    "allowedQuantizations" JSONB,
    "dataCollection" TEXT NOT NULL DEFAULT 'allow',
    "zdr" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- CreateIndex
CREATE UNIQUE INDEX "RoutingSettings_organizationId_workspaceId_key" ON "RoutingSettings"("organizationId", "workspaceId");
