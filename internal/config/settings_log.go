package config

// logRows adds the log.* settings, beside each other so a part's settings
// are read together.
func logRows() {
	add(enumSpec("log.level", "least severe level logged", []string{"debug", "info", "warn", "error"},
		func(c *Config) *string { return &c.Log.Level }),
		"info", live("cmd/pvans: the logger", "log"),
		"debug, info, warn or error.")
	add(enumSpec("log.format", "auto (console on a terminal, json otherwise), console or json",
		[]string{"auto", "console", "json"}, func(c *Config) *string { return &c.Log.Format }),
		"auto", live("cmd/pvans: the logger", "log"),
		"auto (console on a terminal, json otherwise), console or json.")
}
