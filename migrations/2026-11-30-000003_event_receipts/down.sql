DROP TABLE event_receipts;
