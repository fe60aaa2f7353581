"""Word pools the generator draws from: names, places, products, carriers.

Every English name and email domain is made up or reserved (example.*), so nothing the demo
sends can reach a real person.
"""

from __future__ import annotations

from dataclasses import dataclass

# (hanzi, pinyin) -- common surnames and given names, so emails can be spelled from names.
SURNAMES: tuple[tuple[str, str], ...] = (
    ("王", "wang"), ("李", "li"), ("张", "zhang"), ("刘", "liu"), ("陈", "chen"),
    ("杨", "yang"), ("黄", "huang"), ("赵", "zhao"), ("吴", "wu"), ("周", "zhou"),
    ("徐", "xu"), ("孙", "sun"), ("马", "ma"), ("朱", "zhu"), ("胡", "hu"),
    ("郭", "guo"), ("何", "he"), ("林", "lin"), ("罗", "luo"), ("高", "gao"),
    ("郑", "zheng"), ("梁", "liang"), ("谢", "xie"), ("宋", "song"), ("唐", "tang"),
    ("许", "xu"), ("邓", "deng"), ("冯", "feng"), ("韩", "han"), ("曹", "cao"),
    ("曾", "zeng"), ("彭", "peng"), ("萧", "xiao"), ("蔡", "cai"), ("潘", "pan"),
    ("田", "tian"), ("董", "dong"), ("袁", "yuan"), ("于", "yu"), ("余", "yu"),
)  # fmt: skip

GIVEN_NAMES: tuple[tuple[str, str], ...] = (
    ("伟", "wei"), ("芳", "fang"), ("娜", "na"), ("敏", "min"), ("静", "jing"),
    ("丽", "li"), ("强", "qiang"), ("磊", "lei"), ("军", "jun"), ("洋", "yang"),
    ("勇", "yong"), ("艳", "yan"), ("杰", "jie"), ("娟", "juan"), ("涛", "tao"),
    ("明", "ming"), ("超", "chao"), ("秀英", "xiuying"), ("霞", "xia"), ("平", "ping"),
    ("刚", "gang"), ("桂英", "guiying"), ("建华", "jianhua"), ("晓明", "xiaoming"),
    ("文博", "wenbo"), ("子涵", "zihan"), ("欣怡", "xinyi"), ("浩然", "haoran"),
    ("雨桐", "yutong"), ("宇轩", "yuxuan"), ("思远", "siyuan"), ("梓萱", "zixuan"),
    ("俊杰", "junjie"), ("佳琪", "jiaqi"), ("志强", "zhiqiang"), ("海燕", "haiyan"),
    ("国庆", "guoqing"), ("春梅", "chunmei"), ("一鸣", "yiming"), ("诗涵", "shihan"),
)  # fmt: skip

FIRST_NAMES: tuple[str, ...] = (
    "James", "Emma", "Oliver", "Sophia", "William", "Olivia", "Lucas", "Ava", "Henry",
    "Mia", "Daniel", "Charlotte", "Michael", "Amelia", "David", "Grace", "Thomas", "Chloe",
    "Samuel", "Lily", "Benjamin", "Hannah", "Jack", "Zoe", "Ethan", "Ella", "Noah", "Ruby",
)  # fmt: skip

LAST_NAMES: tuple[str, ...] = (
    "Smith", "Johnson", "Brown", "Taylor", "Miller", "Wilson", "Moore", "Anderson",
    "Clark", "Walker", "Harris", "Martin", "Thompson", "Young", "King", "Wright",
    "Scott", "Green", "Baker", "Adams", "Nelson", "Carter", "Mitchell", "Turner",
)  # fmt: skip

EMAIL_DOMAINS: tuple[str, ...] = ("example.com", "example.net", "example.org")


@dataclass(frozen=True)
class City:
    zh: str
    en: str
    districts: tuple[tuple[str, str], ...]
    streets: tuple[tuple[str, str], ...]


CITIES: tuple[City, ...] = (
    City(
        "北京市",
        "Beijing",
        (("朝阳区", "Chaoyang"), ("海淀区", "Haidian"), ("东城区", "Dongcheng")),
        (
            ("建国路", "Jianguo Road"),
            ("中关村大街", "Zhongguancun Street"),
            ("东直门内大街", "Dongzhimen Inner Street"),
        ),
    ),
    City(
        "上海市",
        "Shanghai",
        (("浦东新区", "Pudong"), ("徐汇区", "Xuhui"), ("静安区", "Jing'an")),
        (
            ("世纪大道", "Century Avenue"),
            ("漕溪北路", "Caoxi North Road"),
            ("南京西路", "West Nanjing Road"),
        ),
    ),
    City(
        "广州市",
        "Guangzhou",
        (("天河区", "Tianhe"), ("越秀区", "Yuexiu")),
        (("天河路", "Tianhe Road"), ("中山五路", "Zhongshan 5th Road")),
    ),
    City(
        "深圳市",
        "Shenzhen",
        (("南山区", "Nanshan"), ("福田区", "Futian")),
        (("科技园路", "Keji Park Road"), ("深南大道", "Shennan Avenue")),
    ),
    City(
        "杭州市",
        "Hangzhou",
        (("西湖区", "Xihu"), ("滨江区", "Binjiang")),
        (("文三路", "Wensan Road"), ("江南大道", "Jiangnan Avenue")),
    ),
    City(
        "成都市",
        "Chengdu",
        (("武侯区", "Wuhou"), ("锦江区", "Jinjiang")),
        (("人民南路", "South Renmin Road"), ("春熙路", "Chunxi Road")),
    ),
    City(
        "武汉市",
        "Wuhan",
        (("武昌区", "Wuchang"), ("江汉区", "Jianghan")),
        (("中南路", "Zhongnan Road"), ("解放大道", "Jiefang Avenue")),
    ),
    City(
        "南京市",
        "Nanjing",
        (("鼓楼区", "Gulou"), ("玄武区", "Xuanwu")),
        (("中山路", "Zhongshan Road"), ("珠江路", "Zhujiang Road")),
    ),
    City(
        "西安市",
        "Xi'an",
        (("雁塔区", "Yanta"), ("碑林区", "Beilin")),
        (("长安南路", "South Chang'an Road"), ("南大街", "South Street")),
    ),
    City(
        "重庆市",
        "Chongqing",
        (("渝中区", "Yuzhong"), ("江北区", "Jiangbei")),
        (("解放碑步行街", "Jiefangbei Walk"), ("建新北路", "North Jianxin Road")),
    ),
)


@dataclass(frozen=True)
class Product:
    zh: str
    en: str
    min_cents: int
    max_cents: int


PRODUCTS: tuple[Product, ...] = (
    Product("无线蓝牙耳机", "Wireless Bluetooth earbuds", 9900, 89900),
    Product("USB-C 充电线", "USB-C charging cable", 1900, 8900),
    Product("手机保护壳", "Phone case", 2900, 12900),
    Product("智能手环", "Fitness band", 14900, 39900),
    Product("机械键盘", "Mechanical keyboard", 19900, 79900),
    Product("无线鼠标", "Wireless mouse", 4900, 29900),
    Product("保温杯", "Insulated bottle", 5900, 19900),
    Product("电动牙刷", "Electric toothbrush", 12900, 59900),
    Product("空气炸锅", "Air fryer", 29900, 89900),
    Product("床上四件套", "Bedding set", 19900, 69900),
    Product("运动鞋", "Running shoes", 29900, 99900),
    Product("双肩背包", "Backpack", 12900, 45900),
    Product("移动电源", "Power bank", 7900, 25900),
    Product("护肤套装", "Skincare set", 15900, 79900),
    Product("绿茶礼盒", "Green tea gift box", 9900, 39900),
    Product("儿童绘本", "Children's picture book", 2900, 9900),
    Product("电热水壶", "Electric kettle", 8900, 29900),
    Product("显示器支架", "Monitor arm", 15900, 49900),
    Product("降噪耳机", "Noise-cancelling headphones", 99900, 249900),
    Product("平板电脑", "Tablet", 199900, 499900),
)


@dataclass(frozen=True)
class Carrier:
    name: str
    zh: str
    prefix: str  # letters before the digits (EMS picks a second letter per parcel)
    digits: int
    suffix: str = ""


CARRIERS: tuple[Carrier, ...] = (
    Carrier("SF Express", "顺丰速运", "SF", 12),
    Carrier("JD Logistics", "京东物流", "JD", 12),
    Carrier("YTO Express", "圆通速递", "YT", 12),
    Carrier("ZTO Express", "中通快递", "ZT", 12),
    Carrier("EMS", "中国邮政EMS", "E", 9, "CN"),
)

# Where parcels leave from: warehouses of the demo shop.
ORIGINS: tuple[tuple[str, str], ...] = (
    ("广东省深圳市", "Shenzhen, Guangdong"),
    ("浙江省杭州市", "Hangzhou, Zhejiang"),
    ("上海市", "Shanghai"),
    ("湖北省武汉市", "Wuhan, Hubei"),
)

TICKET_SUMMARIES: tuple[tuple[str, str, str], ...] = (
    (
        "complaint",
        "快递员态度不好，包裹被放在门口没有通知。",
        "Courier left the parcel at the door without notice.",
    ),
    (
        "complaint",
        "商品与描述不符，颜色不对。",
        "The item does not match the description; wrong colour.",
    ),
    ("return", "尺码不合适，想换货。", "Wrong size, would like an exchange."),
    ("refund", "订单取消后退款还没到账。", "Refund has not arrived after cancelling the order."),
    ("contact_update", "需要修改收货地址。", "Needs to change the delivery address."),
    (
        "technical",
        "APP 无法登录，提示验证码错误。",
        "Cannot log in to the app; it says the code is wrong.",
    ),
    ("other", "咨询发票开具问题。", "Question about issuing an invoice."),
)
