-- The pages that changed most often in the last 7 days, from the change events in
-- events.jsonl (`recrawl tail change-events --since 7d > events.jsonl`), with the mean
-- change degree (IED, 0 = same text, 1 = all of it rewritten) of their changes.
SELECT
    page.url AS url,
    page.host AS host,
    count(*) FILTER (WHERE changed) AS changes,
    count(*) AS fetches,
    round(avg(CAST(degrees.ied AS DOUBLE)) FILTER (WHERE changed), 3) AS mean_ied
FROM read_json_auto('events.jsonl')
WHERE fetched_at_ms >= epoch_ms(now() - INTERVAL 7 DAY)
GROUP BY url, host
ORDER BY changes DESC, mean_ied DESC, url
LIMIT 20;
