-- 0015: the change hint of this database alone (`poll_changes`, store/postgres/store.py `data_version`). Every
-- statement that writes work, deliveries or actions draws the next value of one sequence; a process that sees the
-- value move looks for work. It was the snapshot's xmax, which moves with any transaction of the whole server, so
-- another database's traffic woke every worker (and a test could never show "nothing changed"). A sequence is not
-- transactional: it moves at the statement, before the commit, and after a rollback too, which a hint allows (the
-- looker finds nothing yet; the commit's NOTIFY, 0014, or the next periodic look finds it). No row is locked, so
-- writers of different processes never wait for each other here.
CREATE SEQUENCE shopbot_changes;
CREATE FUNCTION shopbot_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('shopbot_changes');
    RETURN NULL;
END $$;
CREATE TRIGGER changed_work AFTER INSERT OR UPDATE OR DELETE ON work
    FOR EACH STATEMENT EXECUTE FUNCTION shopbot_changed();
CREATE TRIGGER changed_deliveries AFTER INSERT OR UPDATE OR DELETE ON deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION shopbot_changed();
CREATE TRIGGER changed_actions AFTER INSERT OR UPDATE OR DELETE ON actions
    FOR EACH STATEMENT EXECUTE FUNCTION shopbot_changed();
