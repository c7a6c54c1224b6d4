"""Pure parsers: payload text -> normalized samples. No I/O, no clock, no UI."""
