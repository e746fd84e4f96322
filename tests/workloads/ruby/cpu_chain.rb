# tests/ruby.rs: the main thread runs <main> -> Object#a ->
# Chain::Worker#b -> Object#c forever, c spinning in VM instructions
# only (no method call: its samples are all at c). Lines the test
# expects end in "# line:<name>".

def c
  i = 0
  while i < 100_000 # line:c_first
    i += 1
  end # line:c_last
  i
end

module Chain
  class Worker
    def b
      c # line:b
    end
  end
end

def a(worker)
  worker.b # line:a
end

worker = Chain::Worker.new
while true
  a(worker) # line:main
end
