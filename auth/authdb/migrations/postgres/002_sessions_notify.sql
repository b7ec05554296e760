-- Every node of a deployment hears every change of a session: the channel
-- ctibridge_sessions carries "<schema> <op> <id>", op + for a session
-- written (issued, refreshed) and - for one deleted (revoked, swept).
CREATE FUNCTION auth_sessions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		PERFORM pg_notify('ctibridge_sessions', TG_TABLE_SCHEMA || ' - ' || OLD.id);
	ELSE
		PERFORM pg_notify('ctibridge_sessions', TG_TABLE_SCHEMA || ' + ' || NEW.id);
	END IF;
	RETURN NULL;
END
$$;
CREATE TRIGGER auth_sessions_notify AFTER INSERT OR UPDATE OR DELETE ON auth_sessions
	FOR EACH ROW EXECUTE FUNCTION auth_sessions_notify();
