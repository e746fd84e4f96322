# A fixed call chain for crates/interpreters/tests/ruby_live.rs: the main
# thread runs <main> -> a -> Integer#times -> block in a ->
# Chain::Worker#b -> Array#each -> block in b -> Chain::Worker#c, and c
# blocks reading a pipe nobody writes to. Lines the test expects end in
# "# line:<name>"; keep those markers on the calls.

module Chain
  class Worker
    def b(reader)
      [1].each do |_| # line:b
        c(reader) # line:block_b
      end
    end

    def c(reader)
      reader.read(1) # line:c
    end
  end
end

def a(reader)
  1.times do # line:a
    Chain::Worker.new.b(reader) # line:block_a
  end
end

reader, _writer = IO.pipe
$stdout.puts "ready #{Process.pid}"
$stdout.flush
a(reader) # line:main
