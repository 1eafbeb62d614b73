"""Infrastructure every feature uses: errors, the content-addressed cache, the stage table, the subprocess
wrapper, run directories and their row schema, the Ray session.
"""
