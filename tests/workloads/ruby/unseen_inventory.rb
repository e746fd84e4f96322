# tests/ruby.rs unseen_script_*: the closing measurement's script, written
# apart from the other workloads. Two chains, taken in turn:
#   <main> -> Inventory::Shelf#restock -> Inventory::Shelf#tally ->
#     Inventory::Weighing#weigh (a module's method, mixed in)
#   <main> -> Inventory::Shelf#arrange -> Enumerable#sort_by ->
#     Array#each -> (C) -> block in arrange -> Inventory::Shelf#rank
# Lines the test expects end in "# line:<name>".

module Inventory
  module Weighing
    def weigh(crates)
      load = 0
      n = 0
      while n < 25_000 # line:weigh_first
        load += (n * crates) & 15
        n += 1
      end # line:weigh_last
      load
    end
  end

  class Shelf
    include Weighing

    def initialize(labels)
      @labels = labels
    end

    def restock(crates)
      tally(crates + 1) # line:restock
    end

    def tally(crates)
      weigh(crates) * 2 # line:tally
    end

    def rank(label)
      score = 0
      k = 0
      while k < 2_500 # line:rank_first
        score += (k ^ label.size) & 3
        k += 1
      end # line:rank_last
      score + label.ord
    end

    def arrange
      @labels.sort_by { |label| rank(label) } # line:arrange
    end
  end
end

shelf = Inventory::Shelf.new(%w[pear fig kiwi apple plum lime date quince])
loop do # line:loop
  shelf.restock(3) # line:main_restock
  shelf.arrange # line:main_arrange
end
