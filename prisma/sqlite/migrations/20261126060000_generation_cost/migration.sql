-- AlterTable
ALTER TABLE "Generation" ADD COLUMN "cacheWriteTokens" INTEGER;
ALTER TABLE "Generation" ADD COLUMN "cachedTokens" INTEGER;
ALTER TABLE "Generation" ADD COLUMN "costFemtoUsd" BIGINT;
ALTER TABLE "Generation" ADD COLUMN "reasoningTokens" INTEGER;
ALTER TABLE "Generation" ADD COLUMN "upstreamCostFemtoUsd" BIGINT;
