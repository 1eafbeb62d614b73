"""Why a name changes speed: ncu profiles of both names, attributed to the SASS that differs."""
