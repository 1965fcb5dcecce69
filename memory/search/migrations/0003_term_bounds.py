from django.db import migrations, models

# Per-term bounds for MaxScore pruning (memory/search/bm25.py), kept by the postings
# insert trigger next to df. Deletes do not tighten them (a stale bound is still a bound).
BOUNDS_SQL = """
UPDATE search_searchterm t SET max_tf = c.max_tf, min_dl = c.min_dl
FROM (
    SELECT term_id, max(tf) AS max_tf, min(dl) AS min_dl
    FROM search_searchposting GROUP BY term_id
) c
WHERE t.id = c.term_id;

CREATE OR REPLACE FUNCTION search_postings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_searchterm t
    SET df = t.df + n.c,
        max_tf = greatest(t.max_tf, n.max_tf),
        min_dl = CASE WHEN t.df = 0 THEN n.min_dl ELSE least(t.min_dl, n.min_dl) END
    FROM (
        SELECT term_id, count(*) AS c, max(tf) AS max_tf, min(dl) AS min_dl
        FROM new_postings GROUP BY term_id
    ) n
    WHERE t.id = n.term_id;
    RETURN NULL;
END $$;
"""

BOUNDS_REVERSE_SQL = """
CREATE OR REPLACE FUNCTION search_postings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_searchterm t SET df = t.df + n.c
    FROM (SELECT term_id, count(*) AS c FROM new_postings GROUP BY term_id) n
    WHERE t.id = n.term_id;
    RETURN NULL;
END $$;
"""


class Migration(migrations.Migration):
    dependencies = [("search", "0002_term_df")]

    operations = [
        migrations.AddField(
            model_name="searchterm",
            name="max_tf",
            field=models.PositiveIntegerField(default=0, db_default=0),
        ),
        migrations.AddField(
            model_name="searchterm",
            name="min_dl",
            field=models.PositiveIntegerField(default=0, db_default=0),
        ),
        migrations.RunSQL(BOUNDS_SQL, BOUNDS_REVERSE_SQL),
    ]
