from django.db import migrations, models

# Document frequency per term, kept by statement-level triggers on the postings, and the
# SearchDoc delete trigger reordered to lock the stats row before the term rows (the
# order every writer uses).
DF_SQL = """
UPDATE search_searchterm t SET df = c.n
FROM (SELECT term_id, count(*) AS n FROM search_searchposting GROUP BY term_id) c
WHERE t.id = c.term_id;

CREATE FUNCTION search_postings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_searchterm t SET df = t.df + n.c
    FROM (SELECT term_id, count(*) AS c FROM new_postings GROUP BY term_id) n
    WHERE t.id = n.term_id;
    RETURN NULL;
END $$;

CREATE FUNCTION search_postings_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_searchterm t SET df = t.df - o.c
    FROM (SELECT term_id, count(*) AS c FROM old_postings GROUP BY term_id) o
    WHERE t.id = o.term_id;
    RETURN NULL;
END $$;

CREATE TRIGGER search_postings_inserted AFTER INSERT ON search_searchposting
    REFERENCING NEW TABLE AS new_postings
    FOR EACH STATEMENT EXECUTE FUNCTION search_postings_inserted();
CREATE TRIGGER search_postings_deleted AFTER DELETE ON search_searchposting
    REFERENCING OLD TABLE AS old_postings
    FOR EACH STATEMENT EXECUTE FUNCTION search_postings_deleted();

CREATE OR REPLACE FUNCTION search_doc_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_searchstats s
    SET doc_count = s.doc_count - o.n, total_length = s.total_length - o.len
    FROM (
        SELECT context_id, target, count(*) AS n, sum(length) AS len
        FROM old_docs GROUP BY context_id, target
    ) o
    WHERE s.context_id = o.context_id AND s.target = o.target;
    DELETE FROM search_searchposting p
    USING (SELECT unnest(term_ids) AS term_id, id AS doc_id FROM old_docs) o
    WHERE p.term_id = o.term_id AND p.doc_id = o.doc_id;
    RETURN NULL;
END $$;
"""

DF_REVERSE_SQL = """
DROP TRIGGER search_postings_deleted ON search_searchposting;
DROP TRIGGER search_postings_inserted ON search_searchposting;
DROP FUNCTION search_postings_deleted();
DROP FUNCTION search_postings_inserted();
"""


class Migration(migrations.Migration):
    dependencies = [("search", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="searchterm",
            name="df",
            field=models.PositiveIntegerField(default=0, db_default=0),
        ),
        migrations.RunSQL(DF_SQL, DF_REVERSE_SQL),
    ]
