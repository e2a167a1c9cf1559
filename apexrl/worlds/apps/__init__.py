"""Each world app's data, read and written the same way by every tool surface: mail's
mbox files, the calendar's .ics, the chat export, office files, PDFs, the code runner.
The MCP servers in `apexrl.worlds.servers` present them to an agent."""
