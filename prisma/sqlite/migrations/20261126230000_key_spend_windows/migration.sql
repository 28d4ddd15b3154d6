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

    PRIMARY KEY ("organizationId", "keyHash", "reset", "startMs")
);

-- Backfill: every key's existing generations counted into their windows (src/core/spend/key-spend.ts and
-- docs/limits.md, "Spend counters"). A window's start is the UTC day, the week from Monday or the month the
-- generation's "createdAt" (ISO text with +00:00) falls in, in Unix ms; "none" is all time (start 0). Each cost in
-- two exact integer parts: whole micro-dollars and the femto-dollar remainder.
INSERT INTO "KeySpendWindow" ("organizationId", "keyHash", "reset", "startMs", "costMicroUsd", "costFemtoRest", "byokMicroUsd", "byokFemtoRest")
SELECT g."organizationId", g."keyHash", w."reset",
    CASE w."reset"
        WHEN 'daily' THEN CAST(strftime('%s', g."createdAt", 'start of day') AS INTEGER) * 1000
        WHEN 'weekly' THEN CAST(strftime('%s', g."createdAt", 'start of day', '-6 days', 'weekday 1') AS INTEGER) * 1000
        WHEN 'monthly' THEN CAST(strftime('%s', g."createdAt", 'start of month') AS INTEGER) * 1000
        ELSE 0
    END AS "startMs",
    COALESCE(SUM(g."costFemtoUsd" / 1000000000), 0),
    COALESCE(SUM(g."costFemtoUsd" % 1000000000), 0),
    COALESCE(SUM(CASE WHEN g."credentialSource" = 'byok' THEN g."upstreamCostFemtoUsd" / 1000000000 END), 0),
    COALESCE(SUM(CASE WHEN g."credentialSource" = 'byok' THEN g."upstreamCostFemtoUsd" % 1000000000 END), 0)
FROM "Generation" g
CROSS JOIN (SELECT 'none' AS "reset" UNION ALL SELECT 'daily' UNION ALL SELECT 'weekly' UNION ALL SELECT 'monthly') w
GROUP BY g."organizationId", g."keyHash", w."reset", "startMs";
