"""mqcore: a brokerless, libzmq-architected messaging library in pure Python."""
