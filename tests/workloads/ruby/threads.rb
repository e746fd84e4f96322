# tests/ruby.rs: two threads, each spinning in its own chain
# (block in <main> -> worker_a -> a_leaf, and the same for b), while the
# main thread waits in Thread#join. Each thread takes the GVL in turn:
# the test checks every sample of a thread shows that thread's chain.
# Lines the test expects end in "# line:<name>".

def a_leaf
  i = 0
  while i < 100_000 # line:a_first
    i += 1
  end # line:a_last
end

def worker_a
  a_leaf while true # line:worker_a
end

def b_leaf
  i = 0
  while i < 100_000 # line:b_first
    i += 1
  end # line:b_last
end

def worker_b
  b_leaf while true # line:worker_b
end

threads = [Thread.new { worker_a }, Thread.new { worker_b }] # line:threads
threads.each(&:join)
