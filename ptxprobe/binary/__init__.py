"""What ptxas produced: cubin facts, SASS with decoded control words, and the diff of two cubins."""
