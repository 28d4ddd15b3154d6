-- AlterTable
ALTER TABLE "Generation" ADD COLUMN     "cacheWriteTokens" INTEGER,
ADD COLUMN     "cachedTokens" INTEGER,
ADD COLUMN     "costFemtoUsd" BIGINT,
ADD COLUMN     "reasoningTokens" INTEGER,
ADD COLUMN     "upstreamCostFemtoUsd" BIGINT;
