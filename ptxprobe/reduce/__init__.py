"""The smallest kernel in which the name still changes the code: ablate, search and keep until nothing more goes."""
