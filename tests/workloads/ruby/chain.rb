# A fixed call chain for crates/interpreters/tests/ruby_live.rs: the main
# thread runs <main> -> a -> b -> Array#each -> block in b -> c, and c
# blocks reading a pipe nobody writes to. Lines the test expects end in
# "# line:<name>"; keep those markers on the calls.

def c(reader)
  reader.read(1) # line:c
end

def b(reader)
  [1].each do |_| # line:b
    c(reader) # line:block
  end
end

def a(reader)
  b(reader) # line:a
end

reader, _writer = IO.pipe
$stdout.puts "ready #{Process.pid}"
$stdout.flush
a(reader) # line:main
