"""Vocabulary of the generated WebShop catalog: categories, product types, attributes, options.

Data only (no logic): :mod:`progpo_envs.webshop.catalog_gen` draws products from these tables.
The five categories are the original WebShop's (``beauty``, ``electronics``, ``fashion``,
``food``, ``furniture``). Each :class:`ProductType` plays the role of one original search
``query`` (the Amazon query the product was scraped with) and carries:

* ``product_category``: the Amazon breadcrumb, ``"A › B › C"``;
* ``nouns``: head nouns used to build titles (what a shopper calls the thing);
* ``pre`` / ``with_`` / ``for_``: attribute phrases, by where the original instruction template
  puts them ("Find me <pre> <query> with <with> for <for>");
* ``options``: ``(option name, pool name)`` pairs, pools in :data:`OPTION_POOLS`;
* ``price``: ``(low, high)`` dollars.

Example:
    >>> from progpo_envs.webshop.catalog_vocab import PRODUCT_TYPES
    >>> sorted({t.category for t in PRODUCT_TYPES})
    ['beauty', 'electronics', 'fashion', 'food', 'furniture']
"""
from __future__ import annotations

from typing import NamedTuple


class ProductType(NamedTuple):
    """One kind of product (one original search query)."""

    category: str
    query: str
    product_category: str
    nouns: tuple[str, ...]
    pre: tuple[str, ...]
    with_: tuple[str, ...]
    for_: tuple[str, ...]
    options: tuple[tuple[str, str], ...]
    price: tuple[float, float]


#: option type -> the values a generated product draws its options from
OPTION_POOLS: dict[str, tuple[str, ...]] = {
    "apparel_colors": (
        "Black", "White", "Navy Blue", "Grey", "Heather Grey", "Red", "Burgundy", "Olive Green",
        "Khaki", "Beige", "Pink", "Light Blue", "Royal Blue", "Dark Green", "Purple", "Brown",
        "Charcoal", "Wine Red", "Mustard Yellow", "Army Green", "Camo", "Leopard", "Coral",
        "Teal", "Lavender", "Multicolor", "Cream", "Apricot",
    ),
    "apparel_sizes": (
        "X-Small", "Small", "Medium", "Large", "X-Large", "XX-Large", "3X-Large", "4X-Large",
    ),
    "shoe_sizes": (
        "5", "5.5", "6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12",
        "13", "7 Wide", "8 Wide", "9 Wide",
    ),
    "pant_sizes": (
        "28W x 30L", "30W x 30L", "30W x 32L", "32W x 30L", "32W x 32L", "34W x 32L",
        "34W x 34L", "36W x 32L", "38W x 32L", "40W x 30L",
    ),
    "beauty_colors": (
        "Rose Gold", "Nude", "Natural Beige", "Ivory", "Warm Sand", "Honey", "Mocha",
        "Berry", "Coral", "Cherry Red", "Mauve", "Plum", "Clear", "Black", "Brown",
        "Light Brown", "Dark Brown", "Ash Blonde", "Platinum", "Pink",
    ),
    "beauty_sizes": (
        "1 Fl Oz (Pack of 1)", "2 Fl Oz", "3.4 Fl Oz", "4 Fl Oz (Pack of 2)", "6.7 Fl Oz",
        "8 Fl Oz", "12 Fl Oz", "16 Fl Oz (Pack of 3)", "0.5 Ounce", "1.7 Ounce", "Travel Size",
        "Pack of 6",
    ),
    "hair_lengths": (
        "14 Inch", "16 Inch", "18 Inch", "20 Inch", "22 Inch", "24 Inch", "26 Inch",
    ),
    "device_colors": (
        "Black", "White", "Silver", "Space Gray", "Blue", "Red", "Green", "Rose Gold",
        "Midnight Blue", "Graphite", "Clear", "Purple", "Gold",
    ),
    "cable_lengths": ("3 ft", "6 ft", "10 ft", "15 ft", "25 ft", "50 ft", "1 Pack", "2 Pack",
                      "3 Pack", "5 Pack"),
    "storage_sizes": ("32GB", "64GB", "128GB", "256GB", "512GB", "1TB", "2TB", "4TB"),
    "phone_models": (
        "iPhone 13", "iPhone 13 Pro", "iPhone 14", "iPhone 14 Pro Max", "Galaxy S21",
        "Galaxy S22 Ultra", "Pixel 6", "Pixel 7 Pro", "Galaxy A53", "iPhone 12 Mini",
    ),
    "screen_sizes": ("24 Inch", "27 Inch", "32 Inch", "43 Inch", "50 Inch", "55 Inch",
                     "65 Inch", "75 Inch"),
    "snack_flavors": (
        "Chocolate Chip", "Peanut Butter", "Vanilla Almond", "Strawberry", "Mixed Berry",
        "Salted Caramel", "Coconut", "Wild Berry", "Cinnamon Raisin", "Dark Chocolate",
        "Apple Cinnamon", "Oatmeal Raisin",
    ),
    "coffee_flavors": (
        "Original", "French Vanilla", "Hazelnut", "French Roast", "Mocha", "Caramel",
        "Breakfast Blend", "Dark Roast", "Decaf", "Pumpkin Spice", "Colombian",
    ),
    "nut_flavors": (
        "Sea Salt", "Honey Roasted", "Spicy Chili", "Barbecue", "Garlic Herb", "Unsalted",
        "Lemon Pepper", "Smoked", "Cinnamon Sugar",
    ),
    "tea_flavors": (
        "Chamomile", "Rooibos", "Lemon Ginger", "Mango", "Mixed Berry", "Matcha",
        "Cinnamon Apple", "Hibiscus", "Earl Grey", "Jasmine",
    ),
    "chocolate_flavors": (
        "Dark Chocolate", "Milk Chocolate", "Salted Caramel", "Sea Salt Almond", "Mint",
        "Raspberry", "Hazelnut", "Coconut", "Assorted",
    ),
    "pasta_flavors": (
        "Original", "Spinach", "Tomato Basil", "Garlic Herb", "Whole Wheat", "Spicy Chili",
        "Sesame", "Mushroom", "Chicken", "Beef",
    ),
    "food_sizes": (
        "1 Pound (Pack of 1)", "2 Pound", "5 Pound Bag", "8 Ounce (Pack of 6)",
        "12 Ounce (Pack of 4)", "16 Ounce", "24 Count", "36 Count (Pack of 2)", "6 Count",
        "12 Count", "3.5 Ounce (Pack of 12)", "1.5 Ounce (Pack of 24)",
    ),
    "wood_colors": (
        "Espresso", "Walnut", "Natural", "White", "Black", "Grey", "Rustic Brown", "Oak",
        "Cherry", "Vintage Brown", "Light Grey", "Navy", "Beige", "Green", "Teal",
    ),
    "furniture_sizes": (
        "Twin", "Full", "Queen", "King", "California King", "Small", "Medium", "Large",
        "2 Drawer", "3 Drawer", "4 Tier", "5 Tier", "Set of 2", "Set of 4",
    ),
    "rug_sizes": ("2' x 3'", "3' x 5'", "4' x 6'", "5' x 7'", "6' x 9'", "8' x 10'",
                  "2'6\" x 8' Runner"),
    "styles": ("Modern", "Classic", "Farmhouse", "Mid-Century", "Industrial", "Contemporary",
               "Boho", "Traditional"),
}

# Attribute phrases shared by every type of a category (appended to each type's own lists).
CATEGORY_PRE: dict[str, tuple[str, ...]] = {
    "beauty": ("cruelty free", "paraben free", "high quality", "non toxic", "easy use"),
    "electronics": ("high performance", "easy install", "easy use", "high quality"),
    "fashion": ("daily wear", "comfortable fit", "high quality", "easy care"),
    "food": ("non gmo", "kosher certified", "natural ingredients", "great gift"),
    "furniture": ("easy assemble", "easy clean", "high quality", "long lasting"),
}

BRAND_PARTS: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("Ama", "Bel", "Cor", "Dax", "Elo", "Fin", "Gal", "Hux", "Iva", "Jov", "Kel", "Lum",
     "Mor", "Nov", "Oly", "Pex", "Qua", "Ros", "Sol", "Tiv", "Ulu", "Ver", "Wyn", "Xan",
     "Yor", "Zen", "Bri", "Cal", "Dre", "Eve"),
    ("ra", "lix", "ton", "via", "mond", "ora", "ique", "vo", "ex", "lyn", "ara", "dex",
     "io", "eo", "na", "rix", "tel", "wave", "co", "sa"),
)

# Words mixed into titles to make them look like marketplace titles.
TITLE_FILLERS: dict[str, tuple[str, ...]] = {
    "beauty": ("Professional", "Premium", "Natural", "Travel", "Daily", "Salon Quality",
               "Gentle", "Nourishing"),
    "electronics": ("Upgraded", "2023 Version", "Portable", "Universal", "Compact",
                    "Professional", "Premium", "Smart"),
    "fashion": ("Casual", "Classic", "Vintage", "Lightweight", "Comfortable", "Stylish",
                "Summer", "Winter"),
    "food": ("Gourmet", "Premium", "Family Size", "Snack Pack", "Artisan", "Traditional",
             "Variety Pack", "Fresh"),
    "furniture": ("Modern", "Rustic", "Industrial", "Farmhouse", "Minimalist", "Sturdy",
                  "Compact", "Elegant"),
}

BULLET_TEMPLATES: dict[str, tuple[str, ...]] = {
    "beauty": (
        "SAFE FORMULA: made with {a} ingredients and tested on sensitive skin, suitable for daily use",
        "EASY TO USE: apply a small amount to clean skin; the {n} absorbs quickly without residue",
        "WHAT YOU GET: one {n}, a user guide and our friendly customer service",
        "PERFECT GIFT: an ideal present for mothers, wives, girlfriends and friends on any occasion",
        "TRAVEL FRIENDLY: compact {n} fits in your makeup bag and carry-on luggage",
    ),
    "electronics": (
        "WIDE COMPATIBILITY: this {n} works with most laptops, phones, tablets and game consoles",
        "STABLE PERFORMANCE: {a} design keeps the connection fast and reliable",
        "DURABLE BUILD: premium materials and reinforced joints survive daily use",
        "WHAT YOU GET: {n}, user manual, 18-month warranty and lifetime technical support",
        "PLUG AND GO: no driver needed, just connect the {n} and start using it",
    ),
    "fashion": (
        "MATERIAL: soft and breathable fabric, {a}, comfortable to wear all day",
        "DESIGN: this {n} pairs well with jeans, shorts, skirts or leggings",
        "OCCASION: perfect for casual, work, party, travel, vacation and outdoor activities",
        "SIZE TIP: please check the size chart before ordering the {n}",
        "CARE: machine wash cold with like colors, tumble dry low",
    ),
    "food": (
        "DELICIOUS TASTE: our {n} is {a} and full of flavor",
        "QUALITY INGREDIENTS: made in small batches from carefully selected ingredients",
        "GREAT FOR SHARING: enjoy the {n} at home, at work, on the go or as a gift",
        "STORAGE: keep in a cool, dry place; reseal the package after opening",
        "SATISFACTION GUARANTEED: if you are not happy with the {n}, contact us for a refund",
    ),
    "furniture": (
        "STURDY CONSTRUCTION: the {n} is made of {a} materials and supports up to 300 lbs",
        "EASY ASSEMBLY: all hardware and instructions included, assembles in about 20 minutes",
        "VERSATILE: fits the living room, bedroom, office, entryway or dorm",
        "DIMENSIONS: please check the dimensions of the {n} before ordering",
        "WORRY FREE: 1-year warranty; contact us with any question about the {n}",
    ),
}

DESCRIPTION_TEMPLATES: tuple[str, ...] = (
    "The {brand} {n} is made for everyday use and stands out with its {a1} design. ",
    "Our {n} features {a1} and {a2} details that make it stand out. ",
    "Every {n} is checked by our quality team before it ships. ",
    "Whether you use it at home or on the go, this {n} is a dependable choice. ",
    "Thousands of customers already trust {brand} for their everyday needs. ",
    "Package includes: 1 x {n}. ",
)

_BEAUTY_COLORS = (("Color", "beauty_colors"),)
_BEAUTY_CS = (("Color", "beauty_colors"), ("Size", "beauty_sizes"))
_BEAUTY_S = (("Size", "beauty_sizes"),)
_APPAREL = (("Color", "apparel_colors"), ("Size", "apparel_sizes"))
_SHOES = (("Color", "apparel_colors"), ("Size", "shoe_sizes"))

PRODUCT_TYPES: tuple[ProductType, ...] = (
    # ------------------------------------------------------------------ beauty
    ProductType("beauty", "refillable containers",
                "Beauty & Personal Care › Tools & Accessories › Bags & Cases › Refillable Containers",
                ("Travel Bottles", "Refillable Containers", "Squeeze Bottles", "Spray Bottle Set"),
                ("leak proof", "bpa free", "easy carry", "travel size", "easy clean"),
                ("travel bottles", "silicone", "rose gold"), ("essential oils", "face wash"),
                _BEAUTY_CS, (5.0, 25.0)),
    ProductType("beauty", "scrubs & body treatments",
                "Beauty & Personal Care › Skin Care › Body › Scrubs & Body Treatments",
                ("Body Scrub", "Exfoliating Scrub", "Sugar Scrub", "Body Polish"),
                ("oil free", "clinically proven", "natural ingredients"),
                ("tea tree", "shea butter", "coconut oil", "dead sea salt"),
                ("dead skin", "dry skin", "sensitive skin"), _BEAUTY_S, (8.0, 40.0)),
    ProductType("beauty", "hair loss products",
                "Beauty & Personal Care › Hair Care › Hair Loss Products",
                ("Hair Growth Serum", "Hair Growth Oil", "Biotin Shampoo", "Hair Tonic"),
                ("animal testing", "hair growth", "sulfate free"),
                ("biotin", "rosemary oil", "argan oil"),
                ("natural hair", "dry hair", "hair loss", "thinning hair"), _BEAUTY_S, (10.0, 45.0)),
    ProductType("beauty", "makeup palettes",
                "Beauty & Personal Care › Makeup › Makeup Palettes",
                ("Eyeshadow Palette", "Makeup Palette", "Contour Palette", "Highlighter Palette"),
                ("highly pigmented", "easy blend", "easy apply"), ("shimmer", "matte finish"),
                ("eye makeup", "party makeup"), _BEAUTY_COLORS, (6.0, 35.0)),
    ProductType("beauty", "lip glosses",
                "Beauty & Personal Care › Makeup › Lips › Lip Glosses",
                ("Lip Gloss", "Lip Oil", "Lip Stain", "Lip Plumper"),
                ("long lasting", "moisturizing", "non sticky"), ("hyaluronic acid", "vitamin e"),
                ("dry lips", "daily use"), _BEAUTY_COLORS, (4.0, 22.0)),
    ProductType("beauty", "hair extensions, wigs & accessories",
                "Beauty & Personal Care › Hair Care › Hair Extensions, Wigs & Accessories › Extensions",
                ("Hair Extensions", "Clip In Extensions", "Lace Front Wig", "Ponytail Extension"),
                ("natural looking", "heat resistant", "easy install"), ("human hair", "clip ins"),
                ("thin hair", "daily wear"), (("Color", "beauty_colors"), ("Size", "hair_lengths")),
                (18.0, 120.0)),
    ProductType("beauty", "facial cleansing brushes",
                "Beauty & Personal Care › Skin Care › Tools & Accessories › Cleansing Brushes",
                ("Facial Cleansing Brush", "Face Scrubber", "Silicone Face Brush"),
                ("waterproof", "rechargeable", "easy clean"), ("silicone", "soft bristles"),
                ("deep cleansing", "sensitive skin"), _BEAUTY_COLORS, (9.0, 50.0)),
    # ------------------------------------------------------------- electronics
    ProductType("electronics", "hdmi cables",
                "Electronics › Accessories & Supplies › Audio & Video Accessories › Cables › HDMI Cables",
                ("HDMI Cable", "HDMI Cord", "4K HDMI Cable", "HDMI Adapter"),
                ("high speed", "gold plated", "plug and play"), ("ethernet", "braided nylon"),
                ("gaming console", "home theater"), (("Size", "cable_lengths"),), (5.0, 30.0)),
    ProductType("electronics", "usb chargers",
                "Electronics › Computers & Accessories › Computer Accessories & Peripherals › Chargers",
                ("USB Charger", "Wall Charger", "Charging Station", "Car Charger"),
                ("fast charging", "usb c", "compact design"), ("usb ports", "power delivery"),
                ("iphone", "android phones"), (("Color", "device_colors"),), (8.0, 45.0)),
    ProductType("electronics", "over-ear headphones",
                "Electronics › Headphones, Earbuds & Accessories › Headphones › Over-Ear Headphones",
                ("Wireless Headphones", "Bluetooth Headphones", "Headset", "Over Ear Headphones"),
                ("noise cancelling", "long battery life", "hands free"), ("microphone", "bluetooth"),
                ("gaming", "travel"), (("Color", "device_colors"),), (20.0, 200.0)),
    ProductType("electronics", "cell phone cases",
                "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases",
                ("Phone Case", "Protective Case", "Wallet Case", "Clear Case"),
                ("shockproof", "slim fit", "wireless charging"), ("card holder", "kickstand"),
                ("drop protection",), (("Color", "device_colors"), ("Style", "phone_models")),
                (6.0, 30.0)),
    ProductType("electronics", "memory cards",
                "Electronics › Computers & Accessories › Data Storage › Memory Cards › Micro SD Cards",
                ("Micro SD Card", "Memory Card", "SD Card", "Flash Drive"),
                ("high speed", "water resistant", "plug and play"), ("adapter",),
                ("nintendo switch", "dash cam"), (("Size", "storage_sizes"),), (6.0, 90.0)),
    ProductType("electronics", "televisions",
                "Electronics › Television & Video › Televisions",
                ("Smart TV", "LED TV", "Television", "QLED TV"),
                ("ultra hd", "high performance", "dolby vision"), ("hdmi ports", "alexa built"),
                ("living room",), (("Size", "screen_sizes"),), (150.0, 900.0)),
    ProductType("electronics", "portable power banks",
                "Cell Phones & Accessories › Chargers & Power Adapters › Portable Power Banks",
                ("Power Bank", "Portable Charger", "Battery Pack", "Solar Charger"),
                ("fast charging", "high capacity", "easy carry"), ("led display", "usb c"),
                ("camping", "travel"), (("Color", "device_colors"),), (12.0, 60.0)),
    # ------------------------------------------------------------------ fashion
    ProductType("fashion", "men's casual button-down shirts",
                "Clothing, Shoes & Jewelry › Men › Clothing › Shirts › Casual Button-Down Shirts",
                ("Button Down Shirt", "Dress Shirt", "Flannel Shirt", "Oxford Shirt"),
                ("slim fit", "long sleeve", "button closure", "machine wash"),
                ("cotton spandex", "chest pocket"), ("daily wear", "business casual"),
                _APPAREL, (15.0, 45.0)),
    ProductType("fashion", "women's tops, tees & blouses",
                "Clothing, Shoes & Jewelry › Women › Clothing › Tops, Tees & Blouses",
                ("Blouse", "Tunic Top", "T Shirt", "Tank Top"),
                ("loose fit", "short sleeve", "v neck", "hand wash"), ("lace trim", "polyester"),
                ("summer", "going out"), _APPAREL, (10.0, 35.0)),
    ProductType("fashion", "women's athletic shoes",
                "Clothing, Shoes & Jewelry › Women › Shoes › Athletic › Walking",
                ("Walking Shoes", "Running Shoes", "Sneakers", "Tennis Shoes"),
                ("non slip", "arch support", "lightweight"), ("memory foam", "rubber sole"),
                ("walking", "gym workout"), _SHOES, (20.0, 90.0)),
    ProductType("fashion", "men's boots",
                "Clothing, Shoes & Jewelry › Men › Shoes › Boots",
                ("Work Boots", "Chelsea Boots", "Hiking Boots", "Ankle Boots"),
                ("steel toe", "water resistant", "slip resistant"), ("rubber sole", "leather upper"),
                ("construction", "hiking"), _SHOES, (40.0, 160.0)),
    ProductType("fashion", "men's jeans",
                "Clothing, Shoes & Jewelry › Men › Clothing › Jeans",
                ("Jeans", "Denim Jeans", "Straight Leg Jeans", "Relaxed Fit Jeans"),
                ("straight leg", "regular fit", "machine wash", "button closure"),
                ("stretch denim", "zipper fly"), ("everyday wear",),
                (("Color", "apparel_colors"), ("Size", "pant_sizes")), (20.0, 70.0)),
    ProductType("fashion", "women's dresses",
                "Clothing, Shoes & Jewelry › Women › Clothing › Dresses › Casual",
                ("Maxi Dress", "Sundress", "Cocktail Dress", "Wrap Dress"),
                ("high waist", "short sleeve", "polyester spandex", "hand wash"),
                ("pockets", "floral print"), ("wedding guest", "beach"), _APPAREL, (18.0, 60.0)),
    ProductType("fashion", "men's hoodies & sweatshirts",
                "Clothing, Shoes & Jewelry › Men › Clothing › Active › Active Hoodies",
                ("Hoodie", "Sweatshirt", "Pullover", "Zip Up Hoodie"),
                ("long sleeve", "relaxed fit", "machine wash", "drawstring closure"),
                ("fleece lining", "kangaroo pocket"), ("cold weather", "gym"), _APPAREL,
                (18.0, 55.0)),
    # --------------------------------------------------------------------- food
    ProductType("food", "snack bars",
                "Grocery & Gourmet Food › Snacks & Sweets › Snack Bars › Protein Bars",
                ("Protein Bars", "Granola Bars", "Snack Bars", "Energy Bars"),
                ("gluten free", "high protein", "low sugar", "individually wrapped"),
                ("real fruit", "whole grains"), ("post workout", "breakfast"),
                (("Flavor Name", "snack_flavors"), ("Size", "food_sizes")), (10.0, 40.0)),
    ProductType("food", "coffee",
                "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Coffee › Ground Coffee",
                ("Ground Coffee", "Coffee Beans", "Cold Brew Coffee", "Coffee Pods"),
                ("usda organic", "fair trade", "medium roast"), ("arabica beans",),
                ("drip coffee makers", "french press"),
                (("Flavor Name", "coffee_flavors"), ("Size", "food_sizes")), (8.0, 35.0)),
    ProductType("food", "nuts & seeds",
                "Grocery & Gourmet Food › Snacks & Sweets › Snack Foods › Nuts & Seeds",
                ("Almonds", "Mixed Nuts", "Cashews", "Pistachios"),
                ("non gmo", "keto friendly", "roasted salted"), ("sea salt",), ("snacking",),
                (("Flavor Name", "nut_flavors"), ("Size", "food_sizes")), (7.0, 30.0)),
    ProductType("food", "herbal tea",
                "Grocery & Gourmet Food › Beverages › Coffee, Tea & Cocoa › Tea › Herbal",
                ("Herbal Tea", "Tea Bags", "Loose Leaf Tea", "Green Tea"),
                ("caffeine free", "usda organic", "non gmo"), ("chamomile", "peppermint"),
                ("sleep", "digestion"),
                (("Flavor Name", "tea_flavors"), ("Size", "food_sizes")), (5.0, 25.0)),
    ProductType("food", "chocolate candy",
                "Grocery & Gourmet Food › Snacks & Sweets › Chocolate › Chocolate Bars",
                ("Chocolate Bars", "Chocolate Truffles", "Candy Box", "Chocolate Gift Box"),
                ("individually wrapped", "dairy free", "fair trade"), ("dark chocolate", "almonds"),
                ("valentines day", "gift baskets"),
                (("Flavor Name", "chocolate_flavors"), ("Size", "food_sizes")), (6.0, 45.0)),
    ProductType("food", "pasta & noodles",
                "Grocery & Gourmet Food › Pasta & Noodles › Dried Pasta",
                ("Pasta", "Spaghetti", "Ramen Noodles", "Rice Noodles"),
                ("gluten free", "low carb", "ready to eat", "plant based"), ("whole wheat",),
                ("quick dinner",),
                (("Flavor Name", "pasta_flavors"), ("Size", "food_sizes")), (4.0, 30.0)),
    # ---------------------------------------------------------------- furniture
    ProductType("furniture", "tv stands",
                "Home & Kitchen › Furniture › Living Room Furniture › TV & Media Furniture › Television Stands & Entertainment Centers",
                ("TV Stand", "Entertainment Center", "Media Console", "TV Cabinet"),
                ("easy assemble", "storage space", "engineered wood"), ("cable management", "glass shelves"),
                ("living room", "65 inch tv"), (("Color", "wood_colors"), ("Style", "styles")),
                (60.0, 300.0)),
    ProductType("furniture", "bed frames",
                "Home & Kitchen › Furniture › Bedroom Furniture › Beds, Frames & Bases › Bed Frames",
                ("Bed Frame", "Platform Bed", "Metal Bed Frame", "Upholstered Bed"),
                ("heavy duty", "noise free", "easy assemble", "no box spring needed"),
                ("headboard", "under bed storage"), ("bedroom",),
                (("Color", "wood_colors"), ("Size", "furniture_sizes")), (90.0, 450.0)),
    ProductType("furniture", "office chairs",
                "Home & Kitchen › Furniture › Home Office Furniture › Home Office Chairs › Desk Chairs",
                ("Office Chair", "Desk Chair", "Gaming Chair", "Task Chair"),
                ("height adjustable", "lumbar support", "ergonomic design"), ("armrests", "mesh back"),
                ("home office", "long hours"), (("Color", "wood_colors"),), (50.0, 280.0)),
    ProductType("furniture", "bookcases",
                "Home & Kitchen › Furniture › Home Office Furniture › Bookcases",
                ("Bookshelf", "Bookcase", "Storage Shelf", "Ladder Shelf"),
                ("space saving", "easy assemble", "solid wood"), ("metal frame", "open shelves"),
                ("living room", "office"), (("Color", "wood_colors"), ("Size", "furniture_sizes")),
                (35.0, 220.0)),
    ProductType("furniture", "area rugs",
                "Home & Kitchen › Home Décor › Area Rugs, Runners & Pads › Area Rugs",
                ("Area Rug", "Runner Rug", "Shag Rug", "Washable Rug"),
                ("non slip", "machine washable", "easy clean", "stain resistant"),
                ("rubber backing", "geometric pattern"), ("living room", "bedroom"),
                (("Color", "wood_colors"), ("Size", "rug_sizes")), (25.0, 260.0)),
    ProductType("furniture", "accent chairs",
                "Home & Kitchen › Furniture › Living Room Furniture › Chairs › Accent Chairs",
                ("Accent Chair", "Armchair", "Lounge Chair", "Barrel Chair"),
                ("mid century", "solid wood", "easy assemble"), ("velvet upholstery", "wood legs"),
                ("living room", "reading nook"), (("Color", "wood_colors"),), (80.0, 350.0)),
    ProductType("furniture", "storage cabinets",
                "Home & Kitchen › Furniture › Entryway Furniture › Storage Cabinets",
                ("Storage Cabinet", "Shoe Cabinet", "Dresser", "Nightstand"),
                ("space saving", "easy assemble", "heavy duty"), ("drawers", "adjustable shelves"),
                ("entryway", "bedroom"), (("Color", "wood_colors"), ("Size", "furniture_sizes")),
                (40.0, 240.0)),
)

CATEGORIES: tuple[str, ...] = ("beauty", "electronics", "fashion", "food", "furniture")
