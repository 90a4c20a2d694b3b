DROP TABLE live_tickets;
