-- 0014: LISTEN/NOTIFY as a wake-up hint (C16, last sentence). A commit that leaves agent work pending (an
-- admission, a release), a delivery pending (a new report, a resend, a retry) or an action pending (an approval)
-- notifies its channel; every process LISTENs on one dedicated connection (store/postgres/notify.py) and wakes
-- the part that waits for it. A notification carries nothing (the payload is ''): it only says "look now", and
-- PostgreSQL sends it at commit, once per channel per transaction. It is never the only way work is found: each
-- part also scans periodically and after every reconnect of the listener (notifications sent meanwhile are lost).
-- PostgreSQL only: SQLite's migration 0014 is empty (one process per file wakes itself in-process).

-- One function for the three triggers: the channel is the trigger's argument.
CREATE FUNCTION shopbot_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END $$;
CREATE TRIGGER notify_work AFTER INSERT OR UPDATE OF state ON work
    FOR EACH ROW WHEN (NEW.state = 'pending' AND NEW.kind = 'agent') EXECUTE FUNCTION shopbot_notify('shopbot_work');
CREATE TRIGGER notify_deliveries AFTER INSERT OR UPDATE OF state ON deliveries
    FOR EACH ROW WHEN (NEW.state = 'pending') EXECUTE FUNCTION shopbot_notify('shopbot_deliveries');
CREATE TRIGGER notify_actions AFTER INSERT OR UPDATE OF state ON actions
    FOR EACH ROW WHEN (NEW.state = 'pending') EXECUTE FUNCTION shopbot_notify('shopbot_actions');
