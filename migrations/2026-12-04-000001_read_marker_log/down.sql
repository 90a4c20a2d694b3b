DROP TABLE read_marker_log;
