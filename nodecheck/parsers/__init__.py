"""Pure parsers: one module per tool, turning its raw output into frozen facts or a ParseError."""
