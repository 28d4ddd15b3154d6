-- CreateTable
CREATE TABLE "KeySpendWindow" (
    "organizationId" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "reset" TEXT NOT NULL,
    "startMs" BIGINT NOT NULL,
    "costMicroUsd" BIGINT NOT NULL DEFAULT 0,
    "costFemtoRest" BIGINT NOT NULL DEFAULT 0,
    "byokMicroUsd" BIGINT NOT NULL DEFAULT 0,
    "byokFemtoRest" BIGINT NOT NULL DEFAULT 0,

    CONSTRAINT "KeySpendWindow_pkey" PRIMARY KEY ("organizationId","keyHash","reset","startMs")
);

-- Backfill: every key's existing generations counted into their windows (src/core/spend/key-spend.ts and
-- docs/limits.md, "Spend counters"). A window's start is the UTC day, the week from Monday or the month the
-- generation's "createdAt" (a timestamp without time zone holding UTC) falls in, in Unix ms; "none" is all time
-- (start 0). Each cost in two exact integer parts: whole micro-dollars and the femto-dollar remainder. Writers of
-- an older build still running while this applies would not count their rows: stop them first (docs/limits.md).
INSERT INTO "KeySpendWindow" ("organizationId", "keyHash", "reset", "startMs", "costMicroUsd", "costFemtoRest", "byokMicroUsd", "byokFemtoRest")
SELECT g."organizationId", g."keyHash", w."reset",
    CASE w."reset" WHEN 'none' THEN 0
        ELSE (EXTRACT(EPOCH FROM date_trunc(w."unit", g."createdAt")) * 1000)::bigint
    END AS "startMs",
    COALESCE(SUM(g."costFemtoUsd" / 1000000000), 0),
    COALESCE(SUM(g."costFemtoUsd" % 1000000000), 0),
    COALESCE(SUM(CASE WHEN g."credentialSource" = 'byok' THEN g."upstreamCostFemtoUsd" / 1000000000 END), 0),
    COALESCE(SUM(CASE WHEN g."credentialSource" = 'byok' THEN g."upstreamCostFemtoUsd" % 1000000000 END), 0)
FROM "Generation" g
CROSS JOIN (VALUES ('none', 'day'), ('daily', 'day'), ('weekly', 'week'), ('monthly', 'month')) AS w ("reset", "unit")
GROUP BY g."organizationId", g."keyHash", w."reset", "startMs";
