# tests/ruby.rs lines_past_5000_keep_their_numbers: the test puts 5000
# comment lines at the padding line, so that the methods below lie past
# line 5000: <main> -> Far::Deep#run -> Far::Deep#spin. Lines the test
# expects end in "# line:<name>".

# line:padding

module Far
  class Deep
    def spin
      s = 0
      i = 0
      while i < 100_000 # line:spin_first
        s += i & 7
        i += 1
      end # line:spin_last
      s
    end

    def run
      spin + 1 # line:run
    end
  end
end

deep = Far::Deep.new
while true
  deep.run # line:main
end
