-- CreateTable
CREATE TABLE "RoutingSettings" (
    "id" TEXT NOT NULL,
    "organizationId" TEXT NOT NULL,
    "workspaceId" TEXT NOT NULL DEFAULT '',
    "allowedProviders" JSONB,
    "ignoredProviders" JSONB,
    "allowedQuantizations" JSONB,
    "dataCollection" TEXT NOT NULL DEFAULT 'allow',
    "zdr" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "RoutingSettings_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "RoutingSettings_organizationId_workspaceId_key" ON "RoutingSettings"("organizationId", "workspaceId");
