-- The primary key identifies a row in UPDATE and DELETE messages.
ALTER TABLE {{.Table}} REPLICA IDENTITY DEFAULT;
