"""The governed shell: commands parsed, judged by what they do, sandboxed and recorded."""
