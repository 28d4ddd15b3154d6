-- CreateTable
CREATE TABLE "CatalogOverride" (
    "slug" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "entry" JSONB NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "CatalogOverride_pkey" PRIMARY KEY ("slug")
);
